"""Local model runtime: one interface per model role, backends chosen by name and imported lazily."""
