// Command gen writes the chart's RBAC rules file from the code (go generate ./deploy/rbac).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/stackflow/stackflow/deploy/rbac"
)

func main() {
	// go generate runs in deploy/rbac.
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err == nil {
		err = rbac.WriteFile(root)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rbac gen:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", rbac.RulesFile)
}
