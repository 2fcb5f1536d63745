package remediation_test

import (
	"strings"
	"testing"

	"github.com/rebootkit/rebootkit/remediation"
)

// seedTable is the seed's truth table, verbatim (including its spelling).
const seedTable = `
|Node Ref exists?|Needs remediation annotation|Powered on?|Reboot annotation|MRC action|
|:-:|:-:|:-:|:-:|---|
|0|1|1|0|Add reboot annotation|
|1|1|1|0|Add reboot annotation|
|1|1|0|1|Delete node|
|0|0|1|0|nothing|
|0|0|1|1|nothing|
|0|1|0|0|nothing|
|0|1|1|1|nothing|
|1|0|0|0|nothing|
|1|0|1|0|nothing|
|1|0|1|1|nothing|
|1|1|0|0|nothing|
|1|1|1|1|nothing|
|0|1|0|1|Remove needs-remediation annoation|
|0|0|0|1|Remove reboot annotation|
|1|0|0|1|Remove reboot annotation|
`

func TestTableReproducesSeed(t *testing.T) {
	seen := map[remediation.TableInput]bool{}
	rows := 0
	for _, line := range strings.Split(strings.TrimSpace(seedTable), "\n")[2:] {
		f := strings.Split(strings.Trim(line, "|"), "|")
		if len(f) != 5 {
			t.Fatalf("bad row %q", line)
		}
		in := remediation.TableInput{NodeRef: f[0] == "1", NeedsRemediation: f[1] == "1", PoweredOn: f[2] == "1", RebootAnnotation: f[3] == "1"}
		// The seed's table says "annoation"; our String spells it right.
		if got := remediation.Table(in).String(); got != strings.ReplaceAll(f[4], "annoation", "annotation") {
			t.Errorf("row %s: got %q, seed says %q", line, got, f[4])
		}
		seen[in] = true
		rows++
	}
	if rows != 15 || len(seen) != 15 {
		t.Fatalf("the seed lists 15 distinct rows, read %d (%d distinct)", rows, len(seen))
	}
	// The 16th row, missing from the seed.
	missing := remediation.TableInput{}
	if seen[missing] {
		t.Fatal("the seed was thought to miss row 0000")
	}
	if got := remediation.Table(missing); got != remediation.TableNothing {
		t.Fatalf("row 0000: got %v, want nothing", got)
	}
}
