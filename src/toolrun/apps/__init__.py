"""Applications built on toolrun: tool sets a service can serve (`toolrun.apps.tasks`)."""
