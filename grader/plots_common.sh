# plots_common.sh (sourced by grader/NN-name/plots.sh, run from the kit's root by
# `make plots`): the lab's driver for the copy being drawn, and the output folder.
# plots_driver BUILD_DIR OUT_DIR labs|solutions NN-name: sets d to the driver and creates
# OUT_DIR; a copy that did not compile stops the script (exit 1) with where to look.
plots_driver() {
    d="$1/grader/$3/$4/driver"
    if [ ! -x "$d" ]; then
        echo "no $3 driver: $3/$4 did not compile (make grade LAB=${4%%-*} shows why)"
        exit 1
    fi
    mkdir -p "$2"
}
