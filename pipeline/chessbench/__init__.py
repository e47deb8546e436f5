"""The paper's released data (ChessBench): its bag files and records, imported to this
project's Parquet table and exported back.

`bag` is the file format, `records` the av/bc/sv records inside, `salvage` reading around
damage, `chunks` the import's reading stage, `rows` its rows; `import_chessbench` and
`export_chessbench` are the commands.
"""
