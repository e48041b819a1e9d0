process.env.MEMPO_BACKEND = 'js';
