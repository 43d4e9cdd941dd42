"""VM-exit profiles: model, providers, names."""
