"""The tool-use family: tool contracts and the call format (`contract`), the tools
(`toolbox`), the episode environment (`env`) and the domains (`domain`)."""
