"""What every paper table shares, whatever its family: the paper's numbers shipped as CSV files
beside this module (:mod:`.numbers`) and the report writer that puts ours beside them (:mod:`.report`)."""
