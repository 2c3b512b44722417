# admin module files
