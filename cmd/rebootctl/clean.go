package main

import "github.com/rebootkit/rebootkit/internal/termsafe"

// clean makes one line a peer sent (a BMC's error, a command's output)
// safe to print on a terminal (see termsafe.Clean).
func clean(s string) string { return termsafe.Clean(s) }

// cleanBlock is clean for several lines (a table).
func cleanBlock(s string) string { return termsafe.CleanBlock(s) }
