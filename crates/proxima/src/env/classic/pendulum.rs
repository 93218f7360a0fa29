//! placeholder; being ported
