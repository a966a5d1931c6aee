// A tenant module whose import fails: the launcher must log one ERROR record, not a raw stack trace.
throw new Error("the agent module failed at import time");
