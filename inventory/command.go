package inventory

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"time"
)

// commandOutputMax caps the output kept from one command (the rest is
// read and dropped, so the command never blocks on a full pipe).
const commandOutputMax = 64 << 10

// runGrouped runs argv with env in its own process group until it exits
// or ctx ends, and returns its combined output. At ctx's end the whole
// group is killed; once the command's own process has exited, the rest of
// its group (a helper it started with &) is killed too, and the wait for
// its output is bounded by commandWaitDelay (a descendant that left the
// group may still hold the pipe). The error is the command's own exit
// status: a command that exited 0 succeeded, whatever its children did.
func runGrouped(ctx context.Context, argv, env []string) ([]byte, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	// Our own *os.File: exec starts no copying goroutine, so Wait returns
	// when the process has exited, before we wait for the output.
	cmd.Stdout, cmd.Stderr = pw, pw
	inGroup(cmd)
	cmd.WaitDelay = commandWaitDelay // bounds the wait for the process after a kill
	err = cmd.Start()
	pw.Close() // the child holds its own copy
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(&out, io.LimitReader(pr, commandOutputMax))
		_, _ = io.Copy(io.Discard, pr)
	}()
	err = cmd.Wait()
	// The leader has exited (and been reaped). Its group's surviving
	// members keep the group id allocated, so this signals them and no
	// stranger; with none left it finds no group.
	killGroup(cmd)
	_ = pr.SetReadDeadline(time.Now().Add(commandWaitDelay))
	<-done
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // not expected with our own pipe; the exit status is what counts
	}
	return out.Bytes(), err
}
