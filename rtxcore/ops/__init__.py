"""Op front-ends, one module per family. Public names are re-exported by
``rtxcore`` itself; import from there."""
