package commands

import (
	"fmt"
	"io"
)

func runOperator(args []string, stdout, stderr io.Writer) error {
	return fmt.Errorf("not built yet")
}
