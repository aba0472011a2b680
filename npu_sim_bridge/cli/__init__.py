"""The npu-sim command line: thin subcommands over the library."""
