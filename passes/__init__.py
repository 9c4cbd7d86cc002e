"""ckir package."""
