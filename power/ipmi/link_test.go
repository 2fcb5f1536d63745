package ipmi

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCancelledExchangeLeavesTheNextAlone: an exchange whose context is
// cancelled just as its answer is taken must not, once it returned, set
// the socket's read deadline in the past under the next exchange (which
// would then time out at once, with its answer on the way).
func TestCancelledExchangeLeavesTheNextAlone(t *testing.T) {
	echo, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { echo.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 64)
		for {
			n, peer, err := echo.ReadFromUDP(buf)
			if err != nil {
				return
			}
			time.Sleep(time.Millisecond) // the answer is on the way when a stale deadline lands
			_, _ = echo.WriteToUDP(buf[:n], peer)
		}
	}()
	l, err := dialLink(context.Background(), echo.LocalAddr().String(), 2*time.Second, 0)
	require.NoError(t, err)
	defer l.close()
	send := func() ([]byte, error) { return []byte{1}, nil }
	for i := 0; i < 100; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		_, err := l.roundTrip(ctx, "first", send, func([]byte) (bool, error) { cancel(); return true, nil })
		require.NoError(t, err)
		_, err = l.roundTrip(context.Background(), "second", send, func([]byte) (bool, error) { return true, nil })
		require.NoError(t, err, "round %d", i)
	}
}
