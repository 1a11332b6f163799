-- v3: why an exchange failed (ASR model missing, LLM down, device lost…), kept with its turn.
ALTER TABLE turns ADD COLUMN error TEXT NOT NULL DEFAULT '';
