// Package design holds the tests that keep docs/DESIGN.md true: the import rules of its
// package table, and that engines are opened by app/factory alone. It has no code of its own.
package design
