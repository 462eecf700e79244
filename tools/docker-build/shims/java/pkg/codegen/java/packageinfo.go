// Package java stands in for pulumi-java's code generator, which the Go module
// proxy here does not serve. The docker-build provider only names its
// PackageInfo in the language map of the schema it reports; it never generates
// a Java SDK at run time, so the type is all it needs.
package java

// PackageInfo is the schema's "java" language entry (same JSON shape upstream).
type PackageInfo struct {
	BuildFiles                      string            `json:"buildFiles,omitempty"`
	GradleNexusPublishPluginVersion string            `json:"gradleNexusPublishPluginVersion,omitempty"`
	Dependencies                    map[string]string `json:"dependencies,omitempty"`
}
