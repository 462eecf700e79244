module github.com/pulumi/pulumi-java

go 1.26
