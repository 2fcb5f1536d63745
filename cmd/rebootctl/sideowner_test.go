package main

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
)

// TestSideFiles_LinksRefused: a side file that is a symbolic link
// (FILE.commands.lock, FILE.commands, FILE.wait) or a hard link to another
// file is never followed, locked, chowned or chmodded, and the link's
// target keeps its owner, mode and content. A link in place of
// FILE.commands or its lock keeps no command from the store (review 37
// round 20: the side files are used only when trusted and usable, else
// the command goes to the store directly): the stop lands in the store
// (read from the store itself) and the operator is told which file was
// refused. (Until round 20 this test wanted the command to fail.)
func TestSideFiles_LinksRefused(t *testing.T) {
	for _, c := range []struct {
		name, suffix string
		hard         bool
		wantErr      string
	}{
		{"lock symlink", ".commands.lock", false, ".commands.lock"},
		{"lock hard link", ".commands.lock", true, ".commands.lock"},
		{"commands symlink", ".commands", false, ".commands"},
		{"wait symlink", ".wait", false, ""},
		{"wait hard link", ".wait", true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, _, _ := review37sWorld(t, 3)
			if os.Geteuid() == 0 {
				require.NoError(t, os.Chown(e.store, 65534, 65534))
			}
			require.NoError(t, os.Chmod(e.store, 0o660))
			target := filepath.Join(filepath.Dir(e.store), "other")
			require.NoError(t, os.WriteFile(target, []byte("{}"), 0o600))
			link := e.store + c.suffix
			if c.hard {
				require.NoError(t, os.Link(target, link))
			} else {
				require.NoError(t, os.Symlink(target, link))
			}
			before, err := os.Stat(target)
			require.NoError(t, err)
			var msg bytes.Buffer
			e.errw = &msg
			_, err = e.operatorCommand("stop", "p1")
			require.NoError(t, err, "a side file that is a link is left alone: the command goes on without it")
			if c.wantErr != "" {
				assert.Contains(t, msg.String(), link, "the message names the side file")
				assert.Contains(t, msg.String(), "applied to the store directly")
			}
			bs, oerr := plan.OpenBolt(e.store) // the store itself, no side file applied
			require.NoError(t, oerr)
			h, herr := bs.GetHead(e.ctx, "p1")
			require.NoError(t, bs.Close())
			require.NoError(t, herr)
			assert.Equal(t, plan.StateStopped, h.State, "the plan's state in the store after the stop")
			after, err := os.Stat(target)
			require.NoError(t, err)
			b, err := os.ReadFile(target)
			require.NoError(t, err)
			assert.Equal(t, "{}", string(b))
			assert.Equal(t, before.Mode(), after.Mode())
			s0, s1 := before.Sys().(*syscall.Stat_t), after.Sys().(*syscall.Stat_t)
			assert.Equal(t, [2]uint32{s0.Uid, s0.Gid}, [2]uint32{s1.Uid, s1.Gid})
		})
	}
}
