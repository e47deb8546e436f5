"""The Lichess evaluation database (lichess_db_eval.jsonl.zst) imported as annotated boards.

`lines` turns one line into one row, `input` reads the file's bytes, `parts` are the import's
resumable ranges; `import_lichess_evals` is the command.
"""
