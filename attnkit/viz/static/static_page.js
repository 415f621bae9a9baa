// A page of pictures and text only: nothing to draw but the ready flag.
start(() => {});
