"""The deploy check of template.yaml (run through infra/deploy_check.py)."""
