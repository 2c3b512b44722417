# config module files
