"""The long-document family: needle_haystack and financial_report over retrieved fragments
(`domain`), and the generated annual reports behind the latter (`financial`, `financial_text`)."""
