// Package apicheck holds the test that keeps the public API embeddable:
// no exported identifier of a public package names an internal type.
package apicheck
