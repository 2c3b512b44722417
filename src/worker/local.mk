# worker module files
