# router module files
