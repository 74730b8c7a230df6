"""The files `modelfleet init` writes: pure text from the user's choices (nothing here touches disk)."""
