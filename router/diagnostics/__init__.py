"""Diagnostics shared by every stage: the located record (`diagnostic`), the catalogue of codes
(`codes`), the errors that carry them (`errors`), did-you-mean suggestions (`suggest`).
"""
