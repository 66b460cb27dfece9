"""The batch: one scan of the folders, the cron cycle over it, status and the dashboard."""
