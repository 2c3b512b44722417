# catalog module files
