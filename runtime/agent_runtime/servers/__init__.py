"""HTTP servers of the runtime components; handlers stay thin, the logic lives in plain classes."""
