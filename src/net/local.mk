# net module files
