"""The Lichess evaluation database (lichess_db_eval.jsonl.zst) imported as annotated boards.

`lines` turns one line into one row, `convert` does so for many lines (in worker processes),
`input` reads the file's bytes, `parts` are the import's resumable ranges, `split_output` readies
and finishes the split, `settings` holds them; `import_lichess_evals` is the command.
"""
