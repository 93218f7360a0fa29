//! Acrobot-v1 (placeholder; being ported).
