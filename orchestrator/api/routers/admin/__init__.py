"""Admin routers under `/v1/admin/` (admin keys only)."""
