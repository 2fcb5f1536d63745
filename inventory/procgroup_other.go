//go:build !unix

package inventory

import "os/exec"

// inGroup is a no-op where process groups do not exist: the command's
// own process is killed at cancellation and commandWaitDelay bounds the
// wait for its output pipe.
func inGroup(*exec.Cmd) {}

// killGroup is a no-op where process groups do not exist.
func killGroup(*exec.Cmd) {}
