package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// MaxSettingValue is the largest setting value accepted, in bytes.
const MaxSettingValue = 1 << 20

// Setting returns a setting's value and whether it is set.
func (s *Store) Setting(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := s.r.QueryRowContext(ctx, `SELECT value FROM settings WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, s.wrap(fmt.Sprintf("setting %q", key), err)
	}
	return v, true, nil
}

// SetSetting stores a setting.
func (s *Store) SetSetting(ctx context.Context, key, value string) error {
	if key == "" || !utf8.ValidString(key) || len(key) > 256 {
		return fmt.Errorf("store: setting key %q: must be 1–256 bytes of UTF-8: %w", key, ErrInvalid)
	}
	if len(value) > MaxSettingValue {
		return fmt.Errorf("store: setting %q: value of %d bytes exceeds %d: %w", key, len(value), MaxSettingValue, ErrInvalid)
	}
	return s.write(ctx, fmt.Sprintf("set setting %q", key), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO settings(key, value, updated_at) VALUES (?, ?, ?)
			ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
			key, value, time.Now().UnixMilli())
		return err
	})
}

// DeleteSetting removes a setting (no error if it was not set).
func (s *Store) DeleteSetting(ctx context.Context, key string) error {
	return s.write(ctx, fmt.Sprintf("delete setting %q", key), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM settings WHERE key = ?`, key)
		return err
	})
}

// Settings returns all settings.
func (s *Store) Settings(ctx context.Context) (map[string]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT key, value FROM settings`)
	if err != nil {
		return nil, s.wrap("settings", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, s.wrap("settings", err)
		}
		out[k] = v
	}
	return out, s.wrap("settings", rows.Err())
}
