package termsafe_test

import (
	"fmt"

	"github.com/rebootkit/rebootkit/internal/termsafe"
)

func ExampleClean() {
	fmt.Printf("%q\n", termsafe.Clean("BMC says \x1b]0;owned\x07hello\nworld"))
	// Output: "BMC says ]0;ownedhello world"
}
