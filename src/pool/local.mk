# pool module files
