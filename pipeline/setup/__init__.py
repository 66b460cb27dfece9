"""Setting a machine up: signing in, checking the setup (doctor), the cron line."""
