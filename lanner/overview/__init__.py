"""What an account sees of itself and of others across the domains (see ``router.py``)."""
