"""Document analysis over generated business documents (invoices, agreements, ledgers, timesheets, statements, balance sheets)."""
