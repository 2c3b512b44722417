# shm module files
