# topology module files
