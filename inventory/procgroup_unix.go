//go:build unix

package inventory

import (
	"os/exec"
	"syscall"
)

// inGroup makes cmd the leader of its own process group and its
// cancellation kill that whole group: a wrapper script's children (which
// hold its output pipe) die with it at the command timeout or an
// interrupt.
func inGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
}

// killGroup kills what is left of cmd's process group once cmd's own
// process has exited (a background helper that would outlive it).
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
