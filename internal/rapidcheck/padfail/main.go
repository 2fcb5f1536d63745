// Command padfail makes rapid failure files replay on fixed code.
//
// rapid shrinks a failing case and saves the bits it drew up to the
// failure. Once the bug is fixed, the test no longer stops there: it draws
// past the end of the saved bits, and rapid reports the file as "no longer
// valid" and skips it, so the regression it pinned is silently unguarded.
// padfail appends zero words to each file named (default 4096): after the
// recorded prefix, the replay goes on with rapid's simplest choices (zero
// bits: smallest numbers, first elements, no more repetitions).
//
// Usage: go run ./internal/rapidcheck/padfail [-n words] FILE...
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	n := flag.Int("n", 4096, "zero words to add after the recorded data")
	flag.Parse()
	for _, f := range flag.Args() {
		if err := pad(f, *n); err != nil {
			fmt.Fprintln(os.Stderr, "padfail:", err)
			os.Exit(1)
		}
	}
}

func pad(name string, n int) error {
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.Write(data)
	if len(data) > 0 && data[len(data)-1] != '\n' {
		b.WriteByte('\n')
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	padded := false
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "# padded by padfail") {
			padded = true
		}
	}
	if padded {
		return nil
	}
	b.WriteString("# padded by padfail: zero words so that the replay on fixed code runs to the end\n")
	for i := 0; i < n; i++ {
		b.WriteString("0x0\n")
	}
	return os.WriteFile(name, []byte(b.String()), 0o644)
}
