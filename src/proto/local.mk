# proto module files
